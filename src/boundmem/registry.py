"""Name -> loader, for each swappable stage (embedder, extractor, maintainer, store, LLM client).

Why: the names a user may type were listed by hand in every CLI option, in help texts and in factory branches, and
drifted apart (a name offered in help was rejected by the check). Each stage's package keeps one Registry; the CLI
takes `choices()` for validation and help, and `load()` builds the chosen implementation. Loaders import their
implementation when called, so listing the names never loads a model."""
from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

from .errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, setting: str = ""):
        self.kind = kind          # "embedder": used in messages
        self.setting = setting    # where the name comes from ("--embedder or BOUNDMEM_EMBEDDER"), for messages
        self._loaders: dict[str, Callable[..., T]] = {}
        self._help: dict[str, str] = {}

    def register(self, name: str, help: str = "") -> Callable[[Callable[..., T]], Callable[..., T]]:
        def add(loader: Callable[..., T]) -> Callable[..., T]:
            if name in self._loaders:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._loaders[name] = loader
            self._help[name] = help
            return loader

        return add

    def choices(self) -> tuple[str, ...]:
        return tuple(self._loaders)

    def help(self) -> str:
        """One line for an option's help: each name with what it is."""
        return "; ".join(f"{n}: {h}" if h else n for n, h in self._help.items())

    def load(self, name: str, *args: Any, **kwargs: Any) -> T:
        try:
            loader = self._loaders[name]
        except KeyError:
            where = f" ({self.setting})" if self.setting else ""
            raise ConfigError(f"unknown {self.kind} {name!r}{where}; choose {', '.join(self._loaders)}") from None
        return loader(*args, **kwargs)
