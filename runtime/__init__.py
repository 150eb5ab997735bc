"""dlpc's runtimes above the backends: execution engines a compiled program calls into
(`mpi`: comm ops on MPI through mpi4py; `launch`: starting ranks under mpiexec)."""
