"""Plots and pages for people to look at."""
