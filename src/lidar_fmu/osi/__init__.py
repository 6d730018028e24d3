"""OSI (Open Simulation Interface) messages: SensorData encoding for the lidar FMU."""
