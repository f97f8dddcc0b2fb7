"""Maintenance: pass / update / append against what is stored in the same detail category."""
