"""Plots and pages for people, with matplotlib's object API (``matplotlib.figure.Figure``): no
pyplot state and no backend to choose, so plotting works headless and from any thread."""
