/* Peer benchmark: MPI_Allreduce (sum, float) with nccl-tests' columns, to compare with
 * `trident-coll bench --transport shm` on the same machine at the same time.
 *
 *   mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 *   mpirun -np 2 ./mpi_allreduce [min_bytes] [max_bytes]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t min_bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)1 << 20;
    size_t max_bytes = argc > 2 ? strtoull(argv[2], NULL, 10) : (size_t)256 << 20;
    float *buf = malloc(max_bytes);
    for (size_t i = 0; i < max_bytes / sizeof(float); i++) buf[i] = 1.0f + (float)(i % 7) * 0.25f;
    if (rank == 0) {
        printf("# MPI_Allreduce, %d ranks\n", n);
        printf("#%12s %12s %10s %8s %8s\n", "size", "count", "time", "algbw", "busbw");
        printf("#%12s %12s %10s %8s %8s\n", "(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)");
    }
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        int count = (int)(bytes / sizeof(float));
        int iters = (int)((1ull << 30) / bytes);
        if (iters < 3) iters = 3;
        if (iters > 20) iters = 20;
        for (int i = 0; i < 2; i++)
            MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double secs = (MPI_Wtime() - start) / iters, slowest;
        MPI_Allreduce(&secs, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double algbw = (double)bytes / slowest / 1e9;
        if (rank == 0)
            printf(" %12zu %12d %10.1f %8.2f %8.2f\n", bytes, count, slowest * 1e6, algbw,
                   algbw * 2.0 * (n - 1) / n);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
