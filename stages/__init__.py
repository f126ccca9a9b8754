"""Optimization stages, one .dl file each."""
