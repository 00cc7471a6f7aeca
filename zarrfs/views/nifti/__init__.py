"""`data.nii` (NIfTI-1 and NIfTI-2): a header made from the array's placement, or the one a
NIfTI-Zarr image keeps of its NIfTI file, then `data`'s bytes. The face: the file's name and
the maker of its header (`views.registry` pairs it with the file that follows it with `data`)."""

from .header import NII_NAME, nifti_header

__all__ = ["NII_NAME", "nifti_header"]
