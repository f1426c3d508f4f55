"""The one redaction (`gatecell.wire.util.secret`), in memory: what it masks, what it leaves, and
that it is stable (that no text makes it slow: tests/security/test_stall.py).

Issue 20, items 1 to 4: every text gatecell did not write goes through it, so each case
below is something a gateway, a notebook cell or a log row held and showed or stored in
clear before.
"""

from __future__ import annotations

import base64
import json

import pytest

from gatecell.wire.util.secret import MASK, Secret, protect_logs, redact, redact_data, redact_json

# Fake keys of the shapes of other services (gitleaks' rules): long enough for each rule.
SHAPES = {
    "openai project": "sk-proj-" + "Ab1" * 20,
    "anthropic": "sk-ant-api03-" + "Cd2" * 20,
    "github pat": "ghp_" + "Ef3" * 12,
    "github oauth": "gho_" + "Gh4" * 12,
    "github fine-grained": "github_pat_11" + "Ij5_" * 15,
    "gitlab": "glpat-" + "Kl6" * 8,
    "google": "AIza" + "Mn7_" * 9,
    "aws": "AKIA" + "OP8Q" * 4,
    "stripe live": "sk_live_" + "Rs9" * 8,
    "stripe restricted": "rk_live_" + "Tu0" * 8,
    "slack bot": "xoxb-1234567890-1234567890-" + "Vw1" * 8,
    "slack app": "xapp-1-A0123456789-" + "Xy2" * 8,
    "hugging face": "hf_" + "Za3" * 11,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}


@pytest.mark.parametrize("name", SHAPES)
def test_other_services_keys_are_masked_in_any_text(name):
    key = SHAPES[name]
    for text in (key, f"echo: {key}.", f'{{"x": "{key}"}}', f"x-request-id: req-{key}"):
        clean = redact(text)
        assert key not in clean and key[8:-4] not in clean and MASK in clean, (name, clean)


# (text, the secret in it) from issue 20, item 3, and their kin: cells, error texts, URLs.
ASSIGNED = [
    ('OPENAI_KEY = "Zq9XbT4mW2pL7vRk"', "Zq9XbT4mW2pL7vRk"),
    ('db_pass = "hunter2"', "hunter2"),
    ('token = b"tok-abcdef"', "tok-abcdef"),
    ('TOKEN = f"{prefix}-abcdef"', "{prefix}-abcdef"),
    ('password: str = "correct horse"', "correct horse"),
    ('SECRET = """line one\nline two"""\nafter = 1', "line one\nline two"),
    ("SECRET = '''one\ntwo'''", "one\ntwo"),
    ("dbPass = r'x1y2z3'", "x1y2z3"),
    ('os.environ["OPENAI_API_KEY"] = "abc123secret"', "abc123secret"),
    ("client = Client(api_key='k-12345678')", "k-12345678"),
    ('{"password": "correct horse"}', "correct horse"),
    ("x-api-key: 'short'", "short"),
    ("engine = create_engine('postgresql://admin:pw-0ne@db.example:5432/app')", "pw-0ne"),
    ("GET https://gw.example/v1/models?api_key=XYZ123&x=1 failed", "XYZ123"),
    ("login failed: password=hunter2 (user alice)", "hunter2"),
    ("401: Authorization: Bearer abc.def-ghi_jkl012 rejected", "abc.def-ghi_jkl012"),
    ("Authorization: Basic YWRtaW46aHVudGVyMg==", "YWRtaW46aHVudGVyMg=="),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCA"),
]


@pytest.mark.parametrize(("text", "secret"), ASSIGNED, ids=[t[:28] for t, _ in ASSIGNED])
def test_secrets_in_context_are_masked_whatever_the_literal(text, secret):
    clean = redact(text)
    assert secret not in clean and MASK in clean, clean


KEPT = [
    "max_tokens = 100 and tokenizer = 'bert'",
    "gw.chat(model='m', max_tokens=100, messages=msgs)",
    "sorted(items, key=lambda row: row[1])",
    'sort_key = "created_at"',
    "compass = 'north'; monkey = 'banana'; bypass = 'yes'",
    "api_key_file = 'keys.txt'",
    "pass a key shipped on purpose: api_key=gatecell.dask.ship(key), or api_key=os.getenv('K')",
    '{"token": "Hello", "logprob": -0.1}',
    "Bearer authentication and Basic access authentication are two schemes",
    "task-abcdefghijkl and disk-usage-report; Asia and AKIAB are words",
    "mail me at alice@example.com, see https://example.com/a:b",
]


@pytest.mark.parametrize("text", KEPT)
def test_code_and_prose_that_hold_no_secret_are_kept(text):
    assert redact(text) == text


def test_masks_are_stable():
    texts = [t for t, _ in ASSIGNED] + list(SHAPES.values())
    for text in texts:
        once = redact(text)
        assert redact(once) == once, once


def test_the_processs_keys_are_masked_in_any_case_split_or_base64_encoded():
    azure = "3f2a9c4b7d1e4f60a8b5c2d9e7f1a3b4"  # an Azure-style hex key: no shape to go by
    protect_logs(Secret(azure))  # what every client does with its key
    other = "gw-live-Zq9XbT4mW2pL7vRkAbCd"  # given, not registered
    for key, given in ((azure, ()), (other, (other,))):
        encoded = [base64.b64encode(prefix.encode() + key.encode()).decode() for prefix in ("", "u:", "id=")]
        texts = [
            f"request {key.upper()} done",
            f"wrapped {key[:7]}\n    {key[7:]} end",
            f'"{key[:20]}\\n{key[20:]}"',  # split by a JSON escape
            *(f"Authorization: Basic {e}" for e in encoded),
            base64.urlsafe_b64encode(key.encode()).decode(),
        ]
        for text in texts:
            clean = redact(text, *given)
            assert key.lower() not in clean.lower().replace(" ", "").replace("\n", "").replace("\\n", "")
            for e in encoded:
                assert e.rstrip("=")[4:-4] not in clean, clean


def test_a_short_key_a_client_was_given_masks_nothing_else():
    """A client made with a key of a few characters (a typo, "sk-") must not register it for
    masking everywhere: it ate "ask-" in prose and the "sk-" of a real key echoed later, whose
    rest was then shown in clear."""
    protect_logs(Secret("sk-"))
    protect_logs(Secret("key"))
    real = "sk-Wk3yS3cretValue0123456789abcd"
    protect_logs(Secret(real))
    assert redact(f"Incorrect API key provided: {real}.") == "Incorrect API key provided: sk-…abcd."
    assert redact("please ask-key for the monkey") == "please ask-key for the monkey"
    assert redact(f"ask-key {real}", "sk-") == "ask-key sk-…abcd"  # nor when given for one text


def test_json_is_redacted_after_decoding():
    key = "sk-escaped-" + "9" * 24
    escaped = "".join(f"\\u{ord(c):04x}" for c in key)
    raw = f'{{"choices": [{{"message": {{"content": "{escaped}"}}}}], "url": "https:\\/\\/u:pw-1@h"}}'
    clean = redact_json(raw)
    assert key not in json.loads(clean)["choices"][0]["message"]["content"]
    assert json.loads(clean)["url"] == f"https://u:{MASK}@h"
    assert redact_json('{"a": "nothing here", "b": [1, 2]}') == '{"a": "nothing here", "b": [1, 2]}'
    code = json.dumps({"content": 'DB = connect(password="hunter2")\nprint(DB)'})
    clean = json.loads(redact_json(code))["content"]
    assert "hunter2" not in clean and clean.endswith("print(DB)")


def test_data_is_redacted_by_value_and_by_the_name_of_its_key():
    data = {
        "api_key": "short",
        "client_secret": "x",
        "headers": {"Authorization": "Basic dXNlcjpwdw=="},
        "token": "Hello",  # log probabilities name their tokens so
        "key": "name",
        "max_tokens": 5,
        "list": ["sk-" + "z" * 20, "plain"],
    }
    clean = redact_data(data)
    assert clean["api_key"] == clean["client_secret"] == MASK
    assert "dXNlcjpwdw" not in json.dumps(clean)
    assert clean["token"] == "Hello" and clean["key"] == "name" and clean["max_tokens"] == 5
    assert clean["list"][0] != data["list"][0] and clean["list"][1] == "plain"
    untouched = {"a": ["b", {"c": 1}]}
    assert redact_data(untouched) is untouched


def test_a_password_shown_masked_already_stays_as_it_is():
    assert (
        redact("through proxy http://bob:****@127.0.0.1:3128")
        == "through proxy http://bob:****@127.0.0.1:3128"
    )
