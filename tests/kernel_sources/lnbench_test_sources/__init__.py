"""Small kernel sources written for lnbench's tests of the builder contract (lnbench.flydsl.contract):
one wave per row, two-pass statistics, plain scalar loads. Not FlyDSL's code; not tuned for speed."""
