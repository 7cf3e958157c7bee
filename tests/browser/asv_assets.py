"""asv 0.6's published index.html loads jQuery, flot, Bootstrap and three small plugins from public
CDNs, which CI hosts cannot reach (PyPI, Debian and npm are all they reach). npm's registry has the same
libraries, so the browser test fetches their tarballs once into the msbench cache, pinned by npm's
sha512 integrity, and points a published site's index.html at local copies instead.

What differs from the CDN: flot 0.8.3 ships unminified on npm (cdnjs minified it: same version, same
code), and stupidtable 1.0.1 is not on npm, so 1.1.3 of the same plugin (`$.fn.stupidtable`) stands in.
jQuery, orderBars, md5 and Bootstrap are byte-identical to the CDN's files; flot and stupidtable could
not pass the CDN's subresource-integrity hashes, so every rewritten tag drops `integrity` and the
tarball's npm hash is checked here instead.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from msbench.cache import cache_dir

REGISTRY = "https://registry.npmjs.org"
VENDOR = "vendor"                        # folder beside the published index.html


@dataclass(frozen=True)
class Tarball:
    """One npm package version, as `npm view NAME@VERSION dist` gives it."""

    name: str
    version: str
    integrity: str                       # dist.integrity: sha512 of the .tgz, base64

    @property
    def url(self) -> str:
        return f"{REGISTRY}/{self.name}/-/{self.name}-{self.version}.tgz"


JQUERY = Tarball("jquery", "3.3.1", "sha512-Ubldcmxp5np52/ENotGxlLe6aGMvmF4R8S6tZjsP6Knsaxd/xp3Zrh50cG93lR6nPXyUFwzN3ZSOQI0wRJNdGg==")
FLOT = Tarball("flot", "0.8.3", "sha512-xg2otcTJDvS+ERK+my4wxG/ASq90QURXtoM4LhacCq0jQW2jbyjdttbRNqU2cPykrpMvJ6b2uSp6SAgYAzj9tQ==")
ORDERBARS = Tarball("flot-orderbars", "1.0.0", "sha512-Jv51fvzevUjNXEeozpwEKfPjhiZhfiJddv0WHjduUTCmSF+7T5K7C9c9Y1wIVmUhDBv5fLMjgbwKecT0GIKPZA==")
STUPIDTABLE = Tarball("stupid-table-plugin", "1.1.3", "sha512-2Vk7XouQPxUQPRe9w0Fu7ZZ8kHLK7rDoLMsCgtKxRNJ7f4dSOGvW9CkHsq5wD6QsaEnWoyLBYH3xOEsrK3yWBg==")
MD5 = Tarball("blueimp-md5", "2.19.0", "sha512-DRQrD6gJyy8FbiE4s+bDoXS9hiW3Vbx5uCdwvcCf3zLHL+Iv7LtGHLpr+GZV8rHG8tK766FGYBwRbu8pELTt+w==")
BOOTSTRAP = Tarball("bootstrap", "3.1.1", "sha512-TAzqS8E/ISpVHP29gYhy+1NSV+FJwApDVQhDfgLYsIuUDJiqJzH2DfORN5tiu+Ie2iBLrzEG34t4Rf465cigqg==")


@dataclass(frozen=True)
class Asset:
    """A CDN URL of asv's index.html and the file of an npm tarball that replaces it."""

    cdn_url: str
    tarball: Tarball
    member: str                          # path inside the tarball
    local: str                           # path under VENDOR


CDNJS_FLOT = "https://cdnjs.cloudflare.com/ajax/libs/flot/0.8.3"
ASSETS = (
    Asset("https://code.jquery.com/jquery-3.3.1.min.js", JQUERY, "package/dist/jquery.min.js", "jquery.min.js"),
    Asset(f"{CDNJS_FLOT}/jquery.flot.min.js", FLOT, "package/jquery.flot.js", "jquery.flot.js"),
    Asset(f"{CDNJS_FLOT}/jquery.flot.time.min.js", FLOT, "package/jquery.flot.time.js", "jquery.flot.time.js"),
    Asset(f"{CDNJS_FLOT}/jquery.flot.selection.min.js", FLOT, "package/jquery.flot.selection.js",
          "jquery.flot.selection.js"),
    Asset(f"{CDNJS_FLOT}/jquery.flot.categories.min.js", FLOT, "package/jquery.flot.categories.js",
          "jquery.flot.categories.js"),
    Asset("https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js", ORDERBARS,
          "package/js/jquery.flot.orderBars.js", "jquery.flot.orderBars.js"),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/stupidtable/1.0.1/stupidtable.min.js", STUPIDTABLE,
          "package/stupidtable.min.js", "stupidtable.min.js"),
    Asset("https://cdnjs.cloudflare.com/ajax/libs/blueimp-md5/2.19.0/js/md5.min.js", MD5, "package/js/md5.min.js",
          "md5.min.js"),
    Asset("https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js", BOOTSTRAP,
          "package/dist/js/bootstrap.min.js", "bootstrap/js/bootstrap.min.js"),
    Asset("https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css", BOOTSTRAP,
          "package/dist/css/bootstrap.min.css", "bootstrap/css/bootstrap.min.css"),
)
BOOTSTRAP_FONTS = "package/dist/fonts/"  # the CSS loads its glyph font from ../fonts/
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["'](https?://[^"']+\.(?:js|css))["']""")
TAG = r"<(?:script|link)\b[^>]*\b(?:src|href)=\"{url}\"[^>]*>"
SRI_ATTRIBUTES = re.compile(r"""\s(?:integrity|crossorigin|referrerpolicy)="[^"]*\"""")


def sri(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def tarball_bytes(tarball: Tarball) -> bytes:
    """The .tgz from the msbench cache, else from the registry; either way checked against its integrity."""
    path = cache_dir("npm") / f"{tarball.name}-{tarball.version}.tgz"
    data = path.read_bytes() if path.exists() else b""
    if sri(data) != tarball.integrity:
        with urllib.request.urlopen(tarball.url, timeout=60) as response:
            data = response.read()
        if sri(data) != tarball.integrity:
            raise ValueError(f"{tarball.url}: integrity {sri(data)[:30]}..., expected {tarball.integrity[:30]}...")
        tmp = path.with_suffix(".part")
        tmp.write_bytes(data)
        tmp.replace(path)
    return data


def vendor_into(html_dir: Path) -> None:
    """Copy every asset (and Bootstrap's fonts) under `html_dir/vendor` and point index.html at them.

    Fails when index.html still loads anything from outside afterwards: an asv upgrade with a new CDN
    script must show up here, not as a page that silently lacks it."""
    archives = {t: tarfile.open(fileobj=io.BytesIO(tarball_bytes(t))) for t in {a.tarball for a in ASSETS}}
    vendor = html_dir / VENDOR
    index = html_dir / "index.html"
    text = index.read_text()
    for asset in ASSETS:
        target = vendor / asset.local
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(archives[asset.tarball].extractfile(asset.member).read())
        tag = re.search(TAG.format(url=re.escape(asset.cdn_url)), text)
        if tag is None:
            raise ValueError(f"{index}: no tag loads {asset.cdn_url} (asv changed its index.html)")
        local = SRI_ATTRIBUTES.sub("", tag.group(0)).replace(asset.cdn_url, f"{VENDOR}/{asset.local}")
        text = text[:tag.start()] + local + text[tag.end():]
    for member in archives[BOOTSTRAP].getmembers():
        if member.isfile() and member.name.startswith(BOOTSTRAP_FONTS):
            font = vendor / "bootstrap" / "fonts" / Path(member.name).name
            font.parent.mkdir(parents=True, exist_ok=True)
            font.write_bytes(archives[BOOTSTRAP].extractfile(member).read())
    left = EXTERNAL.findall(text)
    if left:
        raise ValueError(f"{index} still loads {left} from outside")
    index.write_text(text)
