"""Seed 001's example, shared by the game-master tests: its first-turn prompt as the seed prints it."""

from __future__ import annotations

FIRST_TURN = """=== CORE_BEGIN ===
You are a helpful AI game master.
=== CORE_END ===

=== RULESET_BEGIN ===
Use classic D&D rules for combat.
=== RULESET_END ===

=== WORLD_BEGIN ===
The world of Mystika is magical.
=== WORLD_END ===

=== ENTRY_BEGIN ===
You are at the Whispercross Inn.
=== ENTRY_END ===

=== ENTRY_START_BEGIN ===
Welcome to your adventure!
=== ENTRY_START_END ===

=== NPC_BEGIN ===
NPC: npc.innkeeper
The innkeeper is friendly.
He knows local secrets.
=== NPC_END ===

=== GAME_STATE_BEGIN ===
You arrive at the Whispercross Inn.
=== GAME_STATE_END ===

=== PLAYER_BEGIN ===
You are a level 3 fighter.
=== PLAYER_END ===

=== INPUT_BEGIN ===
I want to explore the inn.
=== INPUT_END ==="""
