"""The Sentinel (Module 08): re-verify PoR packages, pinpoint challenges, compare replays."""

from engine.sentinel.challenges import (
    CHALLENGE_ID_HEX_CHARS,
    Challenge,
    ChallengeKind,
    MerkleProofPacket,
    ProofTree,
    challenge_id,
    make_challenge,
)
from engine.sentinel.package import SentinelReport, VerificationPackage
from engine.sentinel.replay import ReplayComparison, ReplaySnapshot, replay_compare
from engine.sentinel.verify import SentinelAgent, verify_package

__all__ = [
    "CHALLENGE_ID_HEX_CHARS",
    "Challenge",
    "ChallengeKind",
    "MerkleProofPacket",
    "ProofTree",
    "ReplayComparison",
    "ReplaySnapshot",
    "SentinelAgent",
    "SentinelReport",
    "VerificationPackage",
    "challenge_id",
    "make_challenge",
    "replay_compare",
    "verify_package",
]
