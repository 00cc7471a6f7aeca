"""Object stores (S3, GCS, Azure Blob Storage) as compare-and-swap stores: a read returns the
object's generation (ETag, generation number) with its bytes, and a put or a delete carries a
condition on it, so a write-back that finds the object replaced fails with ConflictError.
S3 GETs go through obstore or presigned URLs where they can (`obstore_gets`, `presigned`)."""

from .azure import PROTOCOLS as AZURE_PROTOCOLS
from .azure import azure_delete, azure_put, azure_read, azure_read_objects, is_azure
from .gcs import PROTOCOLS as GCS_PROTOCOLS
from .gcs import gcs_delete, gcs_put, gcs_read, is_gcs
from .s3 import (
           find,
           info_generation,
           is_s3,
           prepare,
           s3_delete,
           s3_put,
           s3_read,
           s3_read_objects,
           s3_read_ranges,
)

__all__ = ["AZURE_PROTOCOLS", "GCS_PROTOCOLS", "azure_delete", "azure_put", "azure_read",
           "azure_read_objects", "find", "gcs_delete", "gcs_put", "gcs_read", "info_generation",
           "is_azure", "is_gcs", "is_s3", "prepare", "s3_delete", "s3_put", "s3_read",
           "s3_read_objects", "s3_read_ranges"]
