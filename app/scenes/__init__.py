"""Scenes: every character of one photo animated together on its page (resource.py)."""
