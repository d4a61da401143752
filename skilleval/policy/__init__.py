"""Policies: the sim (scripted) policy and the OpenAI-compatible client."""
