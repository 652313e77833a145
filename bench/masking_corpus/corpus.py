"""The masking corpus (issue 18, part 7): secrets written every way a model may leak them, and texts
that hold none.

Positives: a synthetic secret of every kind ``echo.domain.masking`` knows, in its real format, written plainly
and every way the attack of issue 18 found leaking (zero-width characters inside, fullwidth letters,
glued to a word, split by a blank, percent-, ``\\u``- or HTML-encoded, an AWS secret beside its name in
YAML, Terraform, the ``aws configure`` prompt…, a private key with four dashes, in lower case, with a
stray END line or prose inside, base64-encoded as in a Kubernetes Secret…). Every secret is generated
here from a seeded RNG, so the repository holds no string a secret scanner would flag, and every run
sees the same corpus.

Negatives: the LoCoMo dialogues (``../shared/data/locomo/``, when present: a clone has no
``../shared``), the repository's own code (``services/**/*.py``) and documentation, hashes (SHA-256,
git SHAs, digests), UUIDs, base64 images (a generated PNG, as data URIs and bare), random base64 and
hex, prose in several languages and near misses (texts about keys that hold none).

    from corpus import negatives, positives   # bench/masking.py and tests/unit/test_masking.py
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import random
import string
import struct
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["REPO", "SHARED", "Negative", "Positive", "in_repo", "negatives", "positives"]

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
SEED = 20261201

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
ZERO_WIDTH = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad")


@dataclass(frozen=True)
class Positive:
    """``text`` holds ``secret`` (as written before any encoding), a secret of kind ``kind``."""

    kind: str
    variant: str
    text: str
    secret: str

    def fragments(self, size: int = 10) -> list[str]:
        """Pieces of the secret that must not survive masking (its prefix aside, which is public)."""
        core = self.secret.replace("\n", "").replace(" ", "")
        return [core[i : i + size] for i in range(6, len(core) - size + 1, size)] or [core]


@dataclass(frozen=True)
class Negative:
    """A text that holds no secret: masking must leave it as it is."""

    source: str
    name: str
    text: str


class _Keys:
    """Secrets in their real formats, from one seeded RNG."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def rand(self, n: int, alphabet: str = ALNUM) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def mixed(self, n: int, alphabet: str = ALNUM) -> str:
        """``n`` characters holding a digit, an upper and a lower case letter."""
        return "Q" + self.rand(n - 3, alphabet) + "7z"

    def tokens(self) -> dict[str, list[str]]:
        r = self.rand
        return {
            "google_api_key": ["AIza" + "Sy" + r(33, ALNUM + "_-"), "AIza" + "Sy" + self.mixed(33)],
            "openai_api_key": [
                "sk-" + self.mixed(20) + "T3Blbk" + "FJ" + self.mixed(20),
                "sk-" + "proj-" + self.mixed(156, ALNUM + "_-"),
                "sk-" + "svcacct-" + self.mixed(120, ALNUM + "_-"),
                "sk-" + "admin-" + self.mixed(64, ALNUM + "_-"),
            ],
            "anthropic_api_key": [
                "sk-" + "ant-" + "api03-" + self.mixed(93, ALNUM + "_-") + "AA",
                "sk-" + "ant-" + "admin01-" + self.mixed(93, ALNUM + "_-") + "AA",
            ],
            "aws_access_key_id": ["AKIA" + r(16, UPPER_DIGITS), "ASIA" + r(16, UPPER_DIGITS)],
            "github_token": [
                "ghp_" + self.mixed(36),
                "gho_" + self.mixed(36),
                "github_pat_" + self.mixed(22) + "_" + self.mixed(59),
            ],
            "slack_token": [
                "xoxb-" + r(12, string.digits) + "-" + r(13, string.digits) + "-" + self.mixed(24),
                "xapp-"
                + "1-"
                + "A0"
                + r(9, UPPER_DIGITS)
                + "-"
                + r(13, string.digits)
                + "-"
                + self.mixed(64),
            ],
            "stripe_api_key": ["sk_" + "live_" + self.mixed(99), "rk_" + "live_" + self.mixed(99)],
            "gitlab_token": ["glpat-" + self.mixed(20, ALNUM + "_-")],
            "huggingface_token": ["hf_" + self.mixed(34, string.ascii_letters)],
            "npm_token": ["npm_" + self.mixed(36)],
            "google_oauth_client_secret": ["GOCSPX-" + self.mixed(28, ALNUM + "_-")],
        }

    def slack_hook(self) -> str:
        r = self.rand
        return (
            "https://hooks.slack.com/services/T"
            + r(8, UPPER_DIGITS)
            + "/B"
            + r(10, UPPER_DIGITS)
            + "/"
            + self.mixed(24)
        )

    def aws_secret(self) -> str:
        return self.mixed(40, ALNUM + "/+")

    def pem(self, kind: str = "RSA ", lines: int = 12, width: int = 64) -> str:
        tag = kind + "PRIVATE" + " KEY" + (" BLOCK" if kind == "PGP " else "")
        body = ["MII" + self.rand(width - 3, B64)] + [self.rand(width, B64) for _ in range(lines - 1)]
        body.append(self.rand(20, B64) + "==")
        return "-----" + "BEGIN " + tag + "-----\n" + "\n".join(body) + "\n-----" + "END " + tag + "-----"


def _pem_body(key: str) -> str:
    return "\n".join(key.split("\n")[1:-1])


# -- writers: how a secret is written into a text ---------------------------------------------------

Writer = Callable[[str, random.Random], str]


def _fullwidth(text: str) -> str:
    out = []
    for char in text:
        if char.isascii() and (char.isalnum() or char in "+/=_-"):
            out.append(chr(ord(char) + 0xFEE0))
        else:
            out.append(char)
    return "".join(out)


def _zero_width(secret: str, rng: random.Random, count: int = 3) -> str:
    chars = list(secret)
    for _ in range(count):
        at = rng.randrange(1, len(chars))
        chars.insert(at, rng.choice(ZERO_WIDTH))
    return "".join(chars)


def _split(secret: str, rng: random.Random, blank: str = " ") -> str:
    at = len(secret) // 2 + rng.randrange(-3, 4)
    return secret[:at] + blank + secret[at:]


def _percent(text: str, lower: bool = False) -> str:
    return "".join(("%%%02x" if lower else "%%%02X") % byte for byte in text.encode())


TOKEN_WRITERS: dict[str, Writer] = {
    "plain in prose": lambda s, r: f"Sure! Your key is {s} and it should stay private.",
    "in code": lambda s, r: f'client = Client(api_key="{s}")\nprint(client.models())\n',
    "in JSON": lambda s, r: json.dumps({"token": s, "ok": True}),
    "in a Markdown table": lambda s, r: f"| name | value |\n|---|---|\n| key | `{s}` |",
    "in a URL": lambda s, r: f"curl 'https://api.example.com/v1/items?key={s}&limit=5'",
    "French and Chinese": lambda s, r: f"Voici la clé : {s}. 这是你的密钥：{s}，请妥善保管。",
    "zero-width inside": lambda s, r: f"key: {_zero_width(s, r)} (keep it)",
    "zero-width in the prefix": lambda s, r: f"key: {s[:2]}\u200b{s[2:]}",
    "soft hyphens": lambda s, r: f"key = {_zero_width(s, r, 5).replace(chr(0x200B), chr(0xAD))}",
    "fullwidth": lambda s, r: f"キー：{_fullwidth(s)}",
    "fullwidth and zero-width": lambda s, r: f"key {_fullwidth(_zero_width(s, r))}",
    "glued to letters": lambda s, r: f"myApiKey{s} is set",
    "glued after _": lambda s, r: f"api_key_{s}",
    "split by a space": lambda s, r: f"the key is {_split(s, r)} ok",
    "split by a line break": lambda s, r: f"the key is\n{_split(s, r, chr(10))}\nok",
    "percent-encoded": lambda s, r: f"https://example.com/cb?k={_percent(s)}",
    "percent-encoded, lower case": lambda s, r: f"k={_percent(s, lower=True)}",
    "JSON \\u escapes": lambda s, r: '{"k": "' + "".join(f"\\u{ord(c):04x}" for c in s) + '"}',
    "HTML entities": lambda s, r: "<code>" + "".join(f"&#{ord(c)};" for c in s) + "</code>",
    "zero-width, JSON-escaped": lambda s, r: json.dumps({"k": _zero_width(s, r)}),
}

AWS_SECRET_WRITERS: dict[str, Callable[[str, str], str]] = {
    "credentials file": lambda v, i: f"[default]\naws_access_key_id = {i}\naws_secret_access_key = {v}\n",
    "env": lambda v, i: f"export AWS_ACCESS_KEY_ID={i}\nexport AWS_SECRET_ACCESS_KEY={v}",
    "JSON": lambda v, i: json.dumps({"AccessKeyId": i, "SecretAccessKey": v}),
    "YAML": lambda v, i: f"aws:\n  access_key_id: {i}\n  secret_access_key: {v}\n",
    "Terraform": lambda v, i: f'provider "aws" {{\n  access_key = "{i}"\n  secret_key = "{v}"\n}}',
    "aws configure prompt": lambda v, i: (
        f"AWS Access Key ID [None]: {i}\nAWS Secret Access Key [None]: {v}\n"
    ),
    "aws configure, key set": lambda v, i: f"AWS Secret Access Key [****************{v[-4:]}]: {v}",
    "credentials CSV": lambda v, i: f"User name,Password,Access key ID,Secret access key\nbob,,{i},{v}\n",
    "Java properties": lambda v, i: f"aws.accessKeyId={i}\naws.secretKey={v}",
    "CLI flag": lambda v, i: f"aws configure set aws_secret_access_key {v}",
    "zero-width inside": lambda v, i: f"aws_secret_access_key = {v[:10]}\u200b{v[10:30]}\u2060{v[30:]}",
    "fullwidth": lambda v, i: f"secret_access_key: {_fullwidth(v)}",
    "percent-encoded": lambda v, i: "q=" + _percent(f"aws_secret_access_key={v}"),
}


def _kube_secret(key: str) -> str:
    data = base64.b64encode(key.encode()).decode()
    return (
        f"apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\ndata:\n  tls.crt: LS0t\n  tls.key: {data}\n"
    )


def _kubeconfig(key: str) -> str:
    data = base64.b64encode(b"\n" + key.encode() + b"\n").decode()
    return f"users:\n- name: admin\n  user:\n    client-key-data: {data}\n"


def _service_account(key: str) -> str:
    account = {
        "type": "service_account",
        "project_id": "demo-project-123456",
        "private_key_id": hashlib.sha1(key.encode()).hexdigest(),
        "private_key": key + "\n",
        "client_email": "bot@demo-project-123456.iam.gserviceaccount.com",
    }
    return "GOOGLE_CREDENTIALS: " + base64.b64encode(json.dumps(account, indent=2).encode()).decode()


def _wrapped_base64(key: str, width: int) -> str:
    data = base64.b64encode(key.encode()).decode()
    return "\n".join(data[i : i + width] for i in range(0, len(data), width))


def _stray_end(key: str) -> str:
    lines = key.split("\n")
    return "\n".join([*lines[:4], "-----" + "END PUBLIC" + " KEY-----", *lines[4:]])


def _stray_prose(key: str) -> str:
    lines = key.split("\n")
    return "\n".join([*lines[:4], "", "(the rest of the key follows)", "", *lines[4:]])


PEM_WRITERS: dict[str, Callable[[str, random.Random], str]] = {
    "plain": lambda k, r: f"Voici la clé :\n{k}\nGardez-la secrète.",
    "in a code fence": lambda k, r: f"```\n{k}\n```",
    "CRLF": lambda k, r: k.replace("\n", "\r\n"),
    "JSON-escaped": lambda k, r: json.dumps({"private_key": k + "\n"}),
    "one line": lambda k, r: "key: " + k.replace("\n", " ") + ".",
    "indented YAML block": lambda k, r: "tls:\n  key: |\n    " + k.replace("\n", "\n    ") + "\n",
    "four dashes": lambda k, r: k.replace("-----", "----"),
    "lower case": lambda k, r: (
        k.split("\n")[0].lower() + "\n" + _pem_body(k) + "\n" + k.split("\n")[-1].lower()
    ),
    "zero-width in BEGIN": lambda k, r: k.replace("BEGIN", "BE\u200bGIN", 1),
    "zero-width in the body": lambda k, r: k.replace("\n", "\u200b\n", 3),
    "stray END PUBLIC KEY inside": lambda k, r: _stray_end(k),
    "prose inside": lambda k, r: _stray_prose(k),
    "truncated": lambda k, r: "\n".join(k.split("\n")[:6]) + "\n\nThat is all I have.",
    "fullwidth header": lambda k, r: _fullwidth(k.split("\n")[0]) + "\n" + "\n".join(k.split("\n")[1:]),
    "percent-encoded": lambda k, r: "pem=" + _percent(k),
    "base64 (Kubernetes Secret)": lambda k, r: _kube_secret(k),
    "base64 (kubeconfig)": lambda k, r: _kubeconfig(k),
    "base64, wrapped at 64": lambda k, r: _wrapped_base64(k, 64),
    "base64, wrapped at 76": lambda k, r: _wrapped_base64(k, 76),
    "base64 in a data URI": lambda k, r: (
        "data:application/x-pem-file;base64," + base64.b64encode(k.encode()).decode()
    ),
    "base64 service-account JSON": lambda k, r: _service_account(k),
    "base64, zero-width inside": lambda k, r: (
        _zero_width(base64.b64encode(k.encode()).decode()[:40], r)
        + base64.b64encode(k.encode()).decode()[40:]
    ),
}
PEM_TYPES = ("RSA ", "EC ", "OPENSSH ", "", "ENCRYPTED ", "DSA ", "PGP ")


def positives(seed: int = SEED) -> list[Positive]:
    """The positives, the same every run for a given seed."""
    rng = random.Random(seed)
    keys = _Keys(rng)
    out: list[Positive] = []
    for kind, secrets in keys.tokens().items():
        for secret in secrets:
            for variant, write in TOKEN_WRITERS.items():
                out.append(Positive(kind, variant, write(secret, rng), secret))
    hook = keys.slack_hook()
    for variant in ("plain in prose", "in JSON", "zero-width inside", "fullwidth", "percent-encoded"):
        out.append(Positive("slack_token", f"webhook, {variant}", TOKEN_WRITERS[variant](hook, rng), hook))
    for variant, write in AWS_SECRET_WRITERS.items():
        value, key_id = keys.aws_secret(), "AKIA" + keys.rand(16, UPPER_DIGITS)
        out.append(Positive("aws_secret_access_key", variant, write(value, key_id), value))
    for kind in PEM_TYPES:
        key = keys.pem(kind)
        for variant, write in PEM_WRITERS.items():
            out.append(Positive("private_key", variant, write(key, rng), _pem_body(key)))
    return out


# -- negatives --------------------------------------------------------------------------------------


def _png(width: int, height: int, rng: random.Random) -> bytes:
    """A real PNG of noise (high-entropy base64, like a photo's)."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    rows = b"".join(b"\x00" + bytes(rng.randrange(256) for _ in range(3 * width)) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


NEAR_MISSES = [
    "Google API keys start with AIza and are 39 characters long; never paste one here.",
    "An AWS access key id looks like AKIA followed by 16 characters, and its secret access key has 40.",
    "Set aws_secret_access_key = <your secret here> in ~/.aws/credentials, then run aws configure.",
    "AWS Secret Access Key [None]: (type it here, it is not echoed)",
    'secret_key = "changeme"  # Terraform: use a variable instead',
    "SECRET_KEY = 'django-" + "insecure-please-change-me-before-deploying-0123'",
    "A PEM file begins with -----BEGIN PRIVATE KEY----- and ends with -----END PRIVATE KEY-----.",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n"
    "-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n"
    "-----END CERTIFICATE-----",
    "Let's begin with the private key concept: it must never leave your machine.",
    "import sklearn\nfrom sklearn.model_selection import train_test_split\n# pip install scikit-learn",
    "Use sk-learn or sk-this-is-not-a-key; ask-me-anything and task-runner-for-the-big-job are words.",
    "const task = 'task-' + id; const ask = `ask-${question}`; disk-usage-report-for-the-cluster",
    "xoxo, hugs and kisses! xoxo-xoxo-xoxo-xoxo-xoxo",
    "https://hooks.slack.com/services/ is the prefix of a webhook.",
    "hf_hub_download(repo_id='bert-base-uncased', filename='config.json')",
    "npm_config_registry=https://registry.npmjs.org/ npm_package_version=1.2.3",
    "The secret key to a good sauce is patience; the secret access to the garden is behind the shed.",
    "Les clés API commencent souvent par sk- ou AIza ; ne les collez jamais dans une conversation.",
    "密钥通常以 AIza 或 sk- 开头，长度固定，请不要在聊天中粘贴。",
    "Progress: 100% done, 50%-75% of users, 20% off — see https://example.com/a%20b?q=x%2Cy",
    "Windows path C:\\Users\\alice\\x64\\data and a regex \\d+\\s* and \\u escapes like \\u00e9",
    "HTML: caf&eacute; &amp; cr&#232;me br&#xfb;l&#233;e",
    "Emoji: 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 👍🏽 1️⃣ — family, flag, heart, thumbs, keycap.",
    "Texte français avec espaces insécables : « bonjour » ; et tirets – comme — ceux-ci.",
    "Math: 𝐀𝐁𝐂 and 𝟏𝟐𝟑, circled ⓐⓑⓒ, fullwidth ＡＢＣ１２３ — short words, no key.",
    "ghp is short for nothing, ghp_short is too short, github_pat_ alone is a prefix.",
    "sk_test_ keys belong in .env files, and rk_live_ ones in a vault.",
]


def _hashes(rng: random.Random) -> Iterator[Negative]:
    for i in range(200):
        data = rng.randbytes(32)
        sha1, sha256 = hashlib.sha1(data).hexdigest(), hashlib.sha256(data).hexdigest()
        integrity = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
        lines = [
            f"commit {sha1}\nAuthor: Ada <ada@example.com>\n\n    Fix the build ({sha1[:7]})",
            f"image: ghcr.io/example/echo@sha256:{sha256}",
            f"{hashlib.md5(data).hexdigest()}  echo-{i}.tar.gz\n{sha256}  echo-{i}.tar.gz",
            f'"integrity": "{integrity}"',
            f"git rev-parse HEAD -> {sha1.upper()}",
        ]
        yield Negative("hashes", f"hash-{i}", "\n".join(lines))


def _uuids(rng: random.Random) -> Iterator[Negative]:
    for i in range(100):
        ids = [str(uuid.UUID(bytes=rng.randbytes(16), version=4)) for _ in range(10)]
        text = json.dumps({"chat_id": ids[0], "messages": [{"id": x, "parentId": ids[0]} for x in ids[1:]]})
        yield Negative("uuids", f"uuids-{i}", text + "\n" + " ".join(x.upper() for x in ids))


def _images(rng: random.Random) -> Iterator[Negative]:
    for i in range(12):
        png = base64.b64encode(_png(24 + 8 * i, 16 + 4 * i, rng)).decode()
        yield Negative(
            "base64 images", f"markdown-{i}", f"Here is the chart:\n\n![chart](data:image/png;base64,{png})"
        )
        yield Negative("base64 images", f"html-{i}", f'<img alt="x" src="data:image/png;base64,{png}">')
        yield Negative("base64 images", f"bare-{i}", png)
        yield Negative(
            "base64 images", f"wrapped-{i}", "\n".join(png[j : j + 76] for j in range(0, len(png), 76))
        )


def _random_blobs(rng: random.Random) -> Iterator[Negative]:
    for i in range(100):
        data = rng.randbytes(rng.randrange(16, 600))
        yield Negative("random base64 and hex", f"blob-{i}", base64.b64encode(data).decode())
        yield Negative("random base64 and hex", f"b64url-{i}", base64.urlsafe_b64encode(data).decode())
        yield Negative("random base64 and hex", f"hex-{i}", binascii.hexlify(data).decode())


def _prose(rng: random.Random) -> Iterator[Negative]:
    for i, text in enumerate(NEAR_MISSES):
        yield Negative("near misses", f"near-{i}", text)


def _files(source: str, paths: list[Path]) -> Iterator[Negative]:
    for path in paths:
        yield Negative(source, str(path.relative_to(REPO)), path.read_text(encoding="utf-8"))


def _locomo() -> Iterator[Negative]:
    folder = SHARED / "data" / "locomo"
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        conversation = json.loads(path.read_text())
        for key, turns in conversation.items():
            if key.startswith("session_") and isinstance(turns, list):
                text = "\n".join(
                    f"{t.get('speaker')}: {t.get('text', '')}" for t in turns if isinstance(t, dict)
                )
                yield Negative("LoCoMo dialogue", f"{path.stem}/{key}", text)


def in_repo(seed: int = SEED) -> list[Negative]:
    """The negatives that live in the repository (a clone has them all)."""
    rng = random.Random(seed + 1)
    code = sorted((REPO / "services").rglob("*.py"))
    docs = sorted((REPO / "docs").rglob("*.md"))
    return [
        *_files("repository code", code),
        *_files("repository docs", docs),
        *_hashes(rng),
        *_uuids(rng),
        *_images(rng),
        *_random_blobs(rng),
        *_prose(rng),
    ]


def negatives(seed: int = SEED) -> list[Negative]:
    """Every negative: the LoCoMo dialogues when ``../shared`` is there, then those in the repository."""
    return [*_locomo(), *in_repo(seed)]
