"""Hooks for the voice frameworks: `boundmem.integrations.pipecat` (a Pipecat FrameProcessor) and
`boundmem.integrations.livekit` (a LiveKit agents hook). Each is imported on its own, with its framework installed
(`pip install 'boundmem[pipecat]'`, `'boundmem[livekit]'`); the turn logic they share is `turns`."""
