"""Geometry: poses and their algebra, meshes and scenes, and a sensor's ray pattern as data.

The ground the rest stands on: nothing here knows of rays' physics, OSI or FMI.
"""
