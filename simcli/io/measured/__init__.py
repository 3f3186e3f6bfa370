"""Files of measurements: readers of nccl-tests output, NCCL Inspector logs, Kineto traces, live logs and
collective calls; bench's result files (written row by row, read back); a measured table filtered and checked
against a profile; the statistics of per-iteration times. No torch."""
