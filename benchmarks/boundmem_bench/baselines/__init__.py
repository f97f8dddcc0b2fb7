"""Baselines for the GVD benchmark, run under CAIM's conditions (same embedder, same k): MemoryBank and TiM."""
from ._common import ChatLLM
from .lsh import RandomProjectionLSH
from .memorybank import MemoryBank, retention, stable_uniform
from .tim import TiM

__all__ = ["ChatLLM", "MemoryBank", "RandomProjectionLSH", "TiM", "retention", "stable_uniform"]
