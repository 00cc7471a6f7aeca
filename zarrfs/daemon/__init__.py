"""Running a mount (`run`) or a server (`serving`) through one life cycle (`lifecycle`), and the
services a mount has for its life: its mountpoint (`mountpoint`), memory kept near the cache
(`memory`), Prometheus metrics (`metrics`) and the dead man's switch that aborts a stuck mount
(`watchdog`)."""
