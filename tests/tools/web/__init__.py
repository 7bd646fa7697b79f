"""Tests of the web tools (treegrpo.tools.web)."""
