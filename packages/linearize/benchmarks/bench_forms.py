"""Time and peak memory of the three forms of each state update, as ratios to the quadratic form
(``make bench PKG=linearize``). The chunked form should stay linear in the sequence length; the
quadratic form materialises the (n, n) mixing matrix (the diagonal-gated one an (n, n, d) tensor)."""

import time

import torch
import torch.nn.functional as F

from linearize.updates import diagonal_update, scalar_update
from paper_common import markdown_table
from paper_common.device import peak_memory


def _run(update: str, form: str, n: int) -> tuple[float, float]:
    g = torch.Generator().manual_seed(0)
    b, h, d = 1, 4, 64
    q = torch.randn(b, h, n, d, generator=g)
    k = F.normalize(torch.randn(b, h, n, d, generator=g), dim=-1)
    v = torch.randn(b, h, n, d, generator=g)
    log_a = F.logsigmoid(torch.randn(b, h, n, generator=g) + 3)
    beta = torch.rand(b, h, n, generator=g)

    def call() -> None:
        with torch.no_grad():
            if update == "diag_gated":
                diagonal_update(q, k, v, log_a[..., None].expand(-1, -1, -1, d), form=form)
            elif update == "gated_delta":
                scalar_update(q, k, v, log_a=log_a, b=beta, c=beta, form=form)
            else:
                scalar_update(q, k, v, log_a=log_a, form=form)

    call()  # warm-up
    start = time.perf_counter()
    with peak_memory("rss") as mem:
        call()
    return time.perf_counter() - start, mem.peak_mib


if __name__ == "__main__":
    torch.set_num_threads(2)
    rows = []
    for update in ("gated", "gated_delta", "diag_gated"):
        for n in (256, 1024, 2048):
            forms = ["recurrent", "chunked"]
            if not (update == "diag_gated" and n > 1024):  # (n, n, d) would not fit in RAM
                forms.append("quadratic")
            res = {f: _run(update, f, n) for f in forms}
            ref = res.get("quadratic")
            for f, (t, mib) in res.items():
                rows.append(
                    {
                        "update": update,
                        "n": n,
                        "form": f,
                        "time_ms": 1e3 * t,
                        "time / quadratic": t / ref[0] if ref else float("nan"),
                        "peak_mib": mib,
                        "memory / quadratic": mib / max(ref[1], 1e-9) if ref else float("nan"),
                    }
                )
    print(markdown_table(rows))
