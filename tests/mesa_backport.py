"""Mesa 25.0.7 from Debian 12's backports, for the driver matrix (tests/runtime/test_drivers.py):
the shared libraries of seven packages, pinned by SHA-256, fetched from deb.debian.org and
unpacked under the tests' cache, loaded by `env()` instead of the system's Mesa (22.3 on
Debian 12). Nothing is installed. Two drivers come from it: its llvmpipe, and zink (OpenGL
over Vulkan) over lavapipe, its Vulkan rasteriser, which a separate compiler path feeds (GLSL
to NIR to SPIR-V and back) and which does not come up on Mesa 22.3.

Mesa 25 is what Debian 13, Ubuntu 25.04 and newer give, and its llvmpipe compiles glcnn's
shaders differently: before glcnn wrote its loops out (shaders.py "Unrolled loops") it kept a
blocked conv's loops and ran it 10x slower than Mesa 22.3. Its parity run keeps glcnn right on
it. Run as a script, it prints the shell exports that load it (README "Drivers"):
`eval "$(python tests/mesa_backport.py)"`, then any glcnn command or benchmark.
"""

import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

from glcnn.resources import download_dir

VERSION = "25.0.7-2~bpo12+1"
MIRROR = "http://deb.debian.org/debian/"
# The packages libEGL_mesa needs beyond Debian 12's own (libdrm >= 2.4.121 among them):
# pool path and SHA-256 of each .deb.
PACKAGES = {
    "pool/main/m/mesa/mesa-libgallium_25.0.7-2~bpo12+1_amd64.deb":
        "6c6f0aa43c5d285116bd32ebce7ede957afd8bbdc8b897c9aae6f80069bfb8d4",
    "pool/main/m/mesa/libegl-mesa0_25.0.7-2~bpo12+1_amd64.deb":
        "0b32bcc02713fd295061351c9248b6cf8e02ab9917f254a68e3475f546008787",
    "pool/main/m/mesa/libgbm1_25.0.7-2~bpo12+1_amd64.deb":
        "07d69191f8b29dc820bf5043fcd2fb3c75c464214cc46cd9045d40dc96996c5c",
    "pool/main/libd/libdrm/libdrm2_2.4.123-1~bpo12+1_amd64.deb":
        "9cc2f341964286295124a32d3625edb76730500625e54a1e682761f883064d7b",
    "pool/main/libd/libdrm/libdrm-amdgpu1_2.4.123-1~bpo12+1_amd64.deb":
        "334e2ae389af0e9cb607c2ccfbbf7ae9feb34131ff998550baeffeeae6cda296",
    "pool/main/libd/libdrm/libdrm-intel1_2.4.123-1~bpo12+1_amd64.deb":
        "44a91fb2a2512bcebaf6c8dff3e02c4199763975180cf9e1c53175cb42c629ff",
    # lavapipe, for zink (needs the system's libvulkan1)
    "pool/main/m/mesa/mesa-vulkan-drivers_25.0.7-2~bpo12+1_amd64.deb":
        "3899f1800424c60a05df5d6913076a526ca8fdbabec43672cd397563d1ca3263",
}
LIBRARIES = "usr/lib/x86_64-linux-gnu"
VENDOR = "usr/share/glvnd/egl_vendor.d/50_mesa.json"
LAVAPIPE = "lavapipe_icd.json"  # written by root(): the package's names a library, not a path


class Unavailable(RuntimeError):
    """The backported Mesa cannot be had here; the message says why."""


def available() -> str | None:
    """None where the backport can run (x86-64 Linux with dpkg-deb), else why not."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return f"the backport is built for x86-64 Linux, not {platform.machine()}"
    if shutil.which("dpkg-deb") is None:
        return "dpkg-deb is missing (the .debs are unpacked with it)"
    return None


def root() -> Path:
    """The unpacked packages, fetched on first use and checked against their SHA-256.

    Raises:
        Unavailable: not x86-64 Linux with dpkg-deb, deb.debian.org unreachable, or a
            package whose SHA-256 differs from its pin.
    """
    why = available()
    if why:
        raise Unavailable(why)
    folder = download_dir(f"mesa-{VERSION.replace('~', '_')}")
    marker = folder / "complete"  # written last: the pins of what was unpacked
    if marker.is_file() and marker.read_text() == _pins():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        unpacked = Path(tmp) / "root"
        for path, digest in PACKAGES.items():
            deb = Path(tmp) / Path(path).name
            deb.write_bytes(_download(MIRROR + path, digest))
            subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
        (unpacked / LAVAPIPE).write_text(json.dumps({"file_format_version": "1.0.0", "ICD": {
            "library_path": str(folder / LIBRARIES / "libvulkan_lvp.so"),
            "api_version": "1.3.0"}}))
        (unpacked / marker.name).write_text(_pins())
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(unpacked, folder)
    return folder


def env(folder: Path, zink: bool = False) -> dict[str, str]:
    """The environment that makes libglvnd's EGL load Mesa from `folder` (root()): its
    llvmpipe, or with `zink` its zink over lavapipe (zink takes a CPU device only when asked
    for software rendering)."""
    variables = {"LD_LIBRARY_PATH": str(folder / LIBRARIES),
                 "__EGL_VENDOR_LIBRARY_FILENAMES": str(folder / VENDOR)}
    if zink:
        variables |= {"MESA_LOADER_DRIVER_OVERRIDE": "zink", "LIBGL_ALWAYS_SOFTWARE": "1",
                      "VK_ICD_FILENAMES": str(folder / LAVAPIPE)}
    return variables


def _pins() -> str:
    return "".join(f"{digest} {path}\n" for path, digest in PACKAGES.items())


def _download(url: str, digest: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            data = response.read()
    except OSError as exc:
        raise Unavailable(f"could not fetch {url} (is deb.debian.org reachable?): {exc}") from None
    got = hashlib.sha256(data).hexdigest()
    if got != digest:
        raise Unavailable(f"{url} has SHA-256 {got}, pinned {digest}")
    return data


if __name__ == "__main__":  # python tests/mesa_backport.py [zink]
    import sys
    for name, value in env(root(), zink=sys.argv[1:] == ["zink"]).items():
        print(f"export {name}={shlex.quote(value)}")
