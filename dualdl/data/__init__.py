"""Write-once input pipeline: the same samples, order and batches on both backends.

See ``docs/data.md``. Nothing here imports a framework until batches are converted to tensors.
"""
from .collate import default_collate, pad_collate, to_tensors
from .dataset import (ArrayDataset, Dataset, IterableDataset, SimpleDataset, Subset, TensorDataset,
                      TransformDataset)
from .loader import DataLoader
from .sampler import (BatchSampler, BucketBatchSampler, DistributedSampler, RandomSampler, Sampler,
                      SequentialSampler)
from .worker import DataLoaderWorkerError, WorkerInfo, get_worker_info, sample_rng

__all__ = [
    "Dataset", "IterableDataset", "ArrayDataset", "TensorDataset", "SimpleDataset", "TransformDataset",
    "Subset", "Sampler", "SequentialSampler", "RandomSampler", "BatchSampler", "DistributedSampler",
    "BucketBatchSampler", "DataLoader", "default_collate", "pad_collate", "to_tensors",
    "DataLoaderWorkerError", "WorkerInfo", "get_worker_info", "sample_rng",
]
