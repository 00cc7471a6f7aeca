"""Object stores (S3, GCS, Azure Blob Storage) as compare-and-swap stores: a read returns the
object's generation (ETag, generation number) with its bytes, and a put or a delete carries a
condition on it, so a write-back that finds the object replaced fails with ConflictError
(`driver`). S3 GETs go through obstore or presigned URLs where they can (`obstore_gets`,
`presigned`); `options` reaches emulators and private endpoints."""

from .azure import PROTOCOLS as AZURE_PROTOCOLS
from .azure import is_azure
from .driver import AzureDriver, GcsDriver, ObjectDriver, S3Driver
from .gcs import PROTOCOLS as GCS_PROTOCOLS
from .gcs import is_gcs
from .options import OPTIONS, azure_options, gcs_options, storage_options
from .s3 import is_s3

__all__ = ["AZURE_PROTOCOLS", "GCS_PROTOCOLS", "OPTIONS", "AzureDriver", "GcsDriver", "ObjectDriver",
           "S3Driver", "azure_options", "gcs_options", "is_azure", "is_gcs", "is_s3", "storage_options"]
