"""Numeric arrays inside contracts: raw little-endian bytes plus dtype and shape, never per-float JSON.

Large payloads (teacher top-K scores, learner batches) cross process boundaries as ``PackedArray``:
pickled by Ray as one bytes object, and base64 in JSON when a contract is dumped to text.
"""

from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field, model_validator

from services.contracts.base import Contract, NonNegInt

ArrayDType = Literal["float32", "float64", "int32", "int64"]


class PackedArray(Contract):
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    dtype: ArrayDType
    shape: list[NonNegInt] = Field(description="Array shape; the data holds prod(shape) items.")
    data: bytes = Field(description="C-order little-endian buffer.")

    @model_validator(mode="after")
    def _size_matches(self) -> "PackedArray":
        expected = int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize
        if len(self.data) != expected:
            raise ValueError(
                f"data has {len(self.data)} bytes, shape {self.shape} of {self.dtype} needs {expected}"
            )
        return self

    @classmethod
    def pack(cls, array: np.ndarray) -> "PackedArray":
        """Pack a numpy array (converted to little-endian C order)."""
        dtype = array.dtype.newbyteorder("<")
        arr = np.ascontiguousarray(array, dtype=dtype)
        return cls(dtype=str(arr.dtype.name), shape=list(arr.shape), data=arr.tobytes())

    def unpack(self) -> np.ndarray:
        """A read-only numpy view of the data."""
        return np.frombuffer(self.data, dtype=np.dtype(self.dtype).newbyteorder("<")).reshape(self.shape)
