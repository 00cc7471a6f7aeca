"""`data.nc`: a group as a NetCDF classic file (CDF-2, or CDF-5 where a type or size needs
it): `header` (the header's bytes and where each variable lies), `classic_types` (what the
classic formats serve in place of CDF-5's types), `group_variables` (a group's arrays
as the file's variables), `group_views` (the file in every group directory)."""

from .group_variables import NC_NAME
from .group_views import CDF5, NcGroupViews

OPTIONS = (CDF5,)  # (the mount's options data.nc reads: `-o nc_format=`)

__all__ = ["CDF5", "NC_NAME", "OPTIONS", "NcGroupViews"]
