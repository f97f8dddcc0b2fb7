"""Demo conversations shipped for `boundmem demo`."""
