"""Real lidar recordings: their readers, and the model held against them.

- :mod:`.recording`: a unit's frames as range images, whatever the maker (the unit's own grid, or rings × azimuth
  bins), and KITTI-style pose files; :mod:`.units`: each pixel's ray, and which reader a calibration calls for;
- the readers: :mod:`.ouster` (``.pcap`` through ouster-sdk, or its extracted ``.npz``), :mod:`.hesai` (packets
  decoded), :mod:`.velodyne` (velodyne-decoder), over :mod:`.packets` (``.pcap``/``.pcapng`` captures, ROS 2 bags);
- :mod:`.registration`: frame poses by registering a recording's own frames (point-to-plane ICP);
- :mod:`.validate`: ``lidar-fmu validate``: a scene made from half of a recording's columns, scanned with the
  unit's model, compared pixel by pixel on the other half;
- :mod:`.calibrate`: ``lidar-fmu calibrate``: the same figures fitted into a sensor spec.

The CLI's options for these commands stay in :mod:`lidar_fmu.tools`; the work is here.
"""
