"""NIfTI's qform: a rotation as the quaternion (b, c, d), a sign `qfac` for the third axis,
the voxel sizes and an offset, to and from a 4x4 affine (nifti1_io's
`nifti_quatern_to_mat44` and `nifti_mat44_to_quatern`). Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Qform", "affine_of", "qform_of"]

_UNIT_TOLERANCE = 1e-7


@dataclass(frozen=True)
class Qform:
    quatern: tuple[float, float, float]  # b, c, d (a = sqrt(1 - b² - c² - d²) >= 0)
    qfac: float  # 1 or -1: the third axis is flipped
    offset: tuple[float, float, float]


def affine_of(qform: Qform, voxel_sizes: tuple[float, float, float]) -> np.ndarray:
    """The 4x4 affine a reader makes of the qform fields (sizes <= 0 read as 1, as nifti1_io)."""
    b, c, d = qform.quatern
    a2 = 1.0 - (b * b + c * c + d * d)
    if a2 < _UNIT_TOLERANCE:  # (a rotation by 180 degrees: a = 0, (b, c, d) made a unit)
        norm = math.sqrt(b * b + c * c + d * d) or 1.0
        a, b, c, d = 0.0, b / norm, c / norm, d / norm
    else:
        a = math.sqrt(a2)
    rotation = np.array([
        [a * a + b * b - c * c - d * d, 2 * (b * c - a * d), 2 * (b * d + a * c)],
        [2 * (b * c + a * d), a * a + c * c - b * b - d * d, 2 * (c * d - a * b)],
        [2 * (b * d - a * c), 2 * (c * d + a * b), a * a + d * d - c * c - b * b],
    ])
    sizes = [s if s > 0 else 1.0 for s in voxel_sizes]
    sizes[2] *= -1.0 if qform.qfac < 0 else 1.0
    affine = np.eye(4)
    affine[:3, :3] = rotation * sizes
    affine[:3, 3] = qform.offset
    return affine


def qform_of(affine: np.ndarray) -> Qform:
    """The qform of the nearest affine whose axes are orthogonal (what a qform can say); the
    voxel sizes are the lengths of the affine's columns."""
    columns = affine[:3, :3].astype(np.float64)
    lengths = np.linalg.norm(columns, axis=0)
    rotation = columns / np.where(lengths > 0, lengths, 1.0)
    left, _, right = np.linalg.svd(rotation)  # (polar decomposition: the nearest orthogonal matrix)
    rotation = left @ right
    qfac = 1.0 if np.linalg.det(rotation) > 0 else -1.0
    rotation[:, 2] *= qfac
    offset = affine[:3, 3]
    return Qform(_quaternion(rotation), qfac, (float(offset[0]), float(offset[1]), float(offset[2])))


def _quaternion(r: np.ndarray) -> tuple[float, float, float]:
    """(b, c, d) of a proper rotation, a >= 0 (nifti1_io's branches, for precision)."""
    trace = 1.0 + r[0, 0] + r[1, 1] + r[2, 2]
    if trace > 0.5:
        a = 0.5 * math.sqrt(trace)
        b, c, d = (r[2, 1] - r[1, 2]) / (4 * a), (r[0, 2] - r[2, 0]) / (4 * a), (r[1, 0] - r[0, 1]) / (4 * a)
    elif 1.0 + r[0, 0] - (r[1, 1] + r[2, 2]) > 1.0:
        b = 0.5 * math.sqrt(1.0 + r[0, 0] - (r[1, 1] + r[2, 2]))
        c, d, a = (r[0, 1] + r[1, 0]) / (4 * b), (r[0, 2] + r[2, 0]) / (4 * b), (r[2, 1] - r[1, 2]) / (4 * b)
    elif 1.0 + r[1, 1] - (r[0, 0] + r[2, 2]) > 1.0:
        c = 0.5 * math.sqrt(1.0 + r[1, 1] - (r[0, 0] + r[2, 2]))
        b, d, a = (r[0, 1] + r[1, 0]) / (4 * c), (r[1, 2] + r[2, 1]) / (4 * c), (r[0, 2] - r[2, 0]) / (4 * c)
    else:
        d = 0.5 * math.sqrt(1.0 + r[2, 2] - (r[0, 0] + r[1, 1]))
        b, c, a = (r[0, 2] + r[2, 0]) / (4 * d), (r[1, 2] + r[2, 1]) / (4 * d), (r[1, 0] - r[0, 1]) / (4 * d)
    sign = -1.0 if a < 0 else 1.0
    return (float(sign * b), float(sign * c), float(sign * d))
