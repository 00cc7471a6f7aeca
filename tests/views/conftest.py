"""The views' room. Its own modules take every family at once, through a mount (every file of
every view opened by its path) or through Bio-Formats (a Java VM): none is for the fast tier,
whose tests of the views are each family's own, in its folder (tiff/, netcdf/, hdf5/, ...)."""
