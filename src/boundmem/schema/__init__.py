from .load import SchemaFileError, builtin_schema, dump_yaml, load_csv, load_schema, load_yaml
from .model import CategoryPath, DetailCategory, DetailRef, MainCategory, Schema, SubCategory, UnknownCategoryError, slug
from .tool import TOOL_NAME, PreferenceItem, flatten, output_model, tool_definition

__all__ = ["SchemaFileError", "builtin_schema", "dump_yaml", "load_csv", "load_schema", "load_yaml", "CategoryPath",
           "DetailCategory", "DetailRef", "MainCategory", "Schema", "SubCategory", "UnknownCategoryError", "slug",
           "TOOL_NAME", "PreferenceItem", "flatten", "output_model", "tool_definition"]
