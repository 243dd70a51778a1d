"""The committed protocol tables are exactly what tools/gen_spec.py makes from ../shared/spec."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC_DIR = ROOT.parent / "shared" / "spec"


@pytest.mark.skipif(not SPEC_DIR.is_dir(), reason="../shared/spec is not beside the checkout")
def test_generated_modules_match_a_fresh_generation():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_spec.py"), "--check",
                             "--spec-dir", str(SPEC_DIR)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("module", ["amqp0_9_1", "amqp0_8", "amqp0_8_qpid", "amqp0_9", "amqp0_9_qpid",
                                    "amqp0_91_qpid", "amqp0_10", "amqp1_0"])
def test_generated_module_holds_no_prose(module):
    text = (ROOT / "warren" / "spec" / f"{module}.py").read_text()
    assert "do not edit" in text
    assert "MUST" not in text and "<doc" not in text


def test_amqp0_10_tables_hold_the_spec_counts_and_codes():
    from warren.spec import amqp0_10 as spec

    # INVENTORY.md §11.5: 12 connection + 13 session controls; the commands of the other 8 classes
    assert len(spec.CONTROLS) == 25
    assert len(spec.COMMANDS) == 3 + 12 + 3 + 10 + 6 + 4 + 13 + 8
    assert spec.CONTROLS[0x0101] is spec.ConnectionStart and spec.CONTROLS[0x020A] is spec.SessionCompleted
    assert spec.COMMANDS[0x0401] is spec.MessageTransfer
    assert spec.MessageTransfer.HEADER and spec.MessageTransfer.BODY
    assert spec.MessageTransfer.HEADER_STRUCTS == (
        "message.delivery-properties", "message.fragment-properties", "message.message-properties")
    assert spec.QueueQuery.RESULT == "queue.queue-query-result"
    assert spec.DtxStart.RESULT == "dtx.xa-result"
    # structs: code, size and pack widths (§11.7); Qpid's errata makes dtx.xid coded, size 4
    props = spec.STRUCTS[0x0403]
    assert props is spec.MessageMessageProperties and (props.SIZE, props.PACK) == (4, 2)
    assert (spec.SessionHeader.SIZE, spec.SessionHeader.PACK, spec.SessionHeader.INDEX) == (1, 1, None)
    assert (spec.DtxXid.SIZE, spec.DtxXid.INDEX) == (4, 0x0604)
    assert ("reply_to", "message.reply-to", False) in props.FIELDS
    assert spec.MessageFragmentProperties().first is True  # default="1" in the XML
    # field types resolve through domains; enums keep their domain
    assert spec.SessionAttach.FIELDS == (("name", "vbin16", True), ("force", "bit", False))
    assert spec.FIELD_ENUMS[("session.detached", "code")] is spec.SessionDetachCode
    assert spec.ExecutionErrorCode.NOT_FOUND == 404 and spec.ExecutionErrorCode.INVALID_ARGUMENT == 542
    assert spec.SegmentType.BODY == 3 and spec.Track.COMMAND == 1
    assert spec.TYPES["sequence-set"] == (None, None, 2) and spec.TYPES["struct32"] == (0xAB, None, 4)
    assert spec.MIN_MAX_FRAME_SIZE == 4096


def test_amqp1_0_tables_hold_the_spec_descriptors_fields_and_choices():
    from warren.spec import amqp1_0 as spec

    # part 2 §2.7: nine performatives, descriptors 0x10..0x18; part 5 §5.3.3: five SASL frames 0x40..0x44
    assert sorted(spec.PERFORMATIVES) == list(range(0x10, 0x19))
    assert sorted(spec.SASL_FRAMES) == list(range(0x40, 0x45))
    assert spec.PERFORMATIVES[0x10] is spec.Open and spec.Open.SYMBOL == "amqp:open:list"
    assert spec.BY_SYMBOL["amqp:transfer:list"] is spec.Transfer is spec.BY_CODE[0x14]
    # outcomes (part 3 §3.4) and the transactions' declared
    assert sorted(spec.OUTCOMES) == [0x24, 0x25, 0x26, 0x27, 0x33]
    assert spec.SECTIONS == {"header": 0x70, "delivery-annotations": 0x71, "message-annotations": 0x72,
                             "properties": 0x73, "application-properties": 0x74, "data": 0x75,
                             "amqp-sequence": 0x76, "amqp-value": 0x77, "footer": 0x78}
    # fields: declared type, the primitive it encodes as, mandatory, multiple, default
    f = {x.name: x for x in spec.Open.FIELDS}
    assert f["container_id"].mandatory and f["container_id"].primitive == "string"
    assert f["max_frame_size"].default == 4294967295 and f["idle_time_out"].primitive == "uint"
    assert f["offered_capabilities"].multiple and f["offered_capabilities"].primitive == "symbol"
    a = {x.name: x for x in spec.Attach.FIELDS}
    assert a["snd_settle_mode"].default == spec.SenderSettleMode.MIXED == 2
    assert a["rcv_settle_mode"].default == spec.ReceiverSettleMode.FIRST == 0
    assert a["source"].type == "*" and a["source"].requires == "source"
    assert spec.Transfer().more is False and spec.Header().priority == 4
    assert spec.Source().expiry_policy == "session-end"
    # restricted types: their choices, and what they restrict
    assert spec.Role.RECEIVER is True and spec.AmqpError.DECODE_ERROR == "amqp:decode-error"
    assert spec.SessionError.UNATTACHED_HANDLE == "amqp:session:unattached-handle"
    assert spec.SaslCode.AUTH == 1
    assert spec.RESTRICTED["delivery-number"] == "sequence-no" and spec.RESTRICTED["sequence-no"] == "uint"
    assert spec.DESCRIBED["data"] == ("amqp:data:binary", 0x75, "binary")
    # every primitive encoding of part 1 §1.6
    codes = {code for encodings in spec.ENCODINGS.values() for _, code, _, _ in encodings}
    assert len(codes) == 39 and spec.MIN_MAX_FRAME_SIZE == 512
