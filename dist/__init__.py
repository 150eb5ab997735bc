"""Distributed training over MPI: the strategies' trainers (`DataParallelTrainer`, ...),
the asynchronous parameter server and `dlpc-train`'s distributed options. The partition
passes are `dlpc.passes.dist`; comm ops run through `dlpc.runtime.mpi`. See
docs/distributed.md."""

from dlpc.dist.data_parallel import DataParallelTrainer, ParameterServerTrainer, shard
from dlpc.dist.parameter_server import AsyncParameterServer, AsyncParameterServerTrainer
from dlpc.dist.pipeline import PipelineTrainer
from dlpc.dist.tensor_parallel import TensorParallelTrainer

__all__ = [
    "AsyncParameterServer",
    "AsyncParameterServerTrainer",
    "DataParallelTrainer",
    "ParameterServerTrainer",
    "PipelineTrainer",
    "TensorParallelTrainer",
    "shard",
]
