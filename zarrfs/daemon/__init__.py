"""Running a mount and the services one mount has for its life: the daemon (`run`), its
mountpoint (`mountpoint`), memory kept near the cache (`memory`), Prometheus metrics
(`metrics`) and the dead man's switch that aborts a stuck mount (`watchdog`)."""
