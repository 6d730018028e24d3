"""Scanning: a sensor over a scene through a backend (:class:`~.lidar.Lidar`), and firing time and motion."""
