"""Bundled ascend-train configs (YAML); a package so that wheels ship them as package data."""
