"""Print what a device proof ran on: torch build, device, profiler activities, peer package versions."""
import importlib.metadata as md

import torch

print("torch", torch.__version__, "| cuda", torch.version.cuda, "| hip", torch.version.hip)
print("device", torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CPU)")
print("profiler activities", sorted(str(a) for a in torch.profiler.supported_activities()))
for dist in ("triton", "liger-kernel", "matplotlib", "pandas", "rich", "click"):
    try:
        print(dist, md.version(dist))
    except md.PackageNotFoundError:
        print(dist, "NOT INSTALLED")
