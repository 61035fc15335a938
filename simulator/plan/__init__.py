"""Capacity planning: the cheapest deployment that meets an SLO (`simulate plan`)."""
