"""Trainers of the bundled models: they read the shared datasets (CarMem users 51-100 only) and write the npz files
the runtime package loads. They are laboratory code, shipped with the benchmarks, never with `boundmem`."""
