"""`lnbench verify`: correctness of a backend against an fp64 reference, judged against torch."""
