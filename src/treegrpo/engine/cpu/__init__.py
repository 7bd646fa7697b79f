"""The engine's opt-in CPU speed-ups: the lean decode step (``lean``), peft LoRA layers folded
into one product (``lora``), linear layers on oneDNN (``onednn``), denormals flushed to zero
(``denormal``) and freed heap memory returned to the system (``memory``). Each one computes what
the plain path computes (up to fp32 rounding) and can be switched off; none imports the rest of
the package, so the engine, the trainer and the SFT loop can each use them."""
