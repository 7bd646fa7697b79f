"""The engine's opt-in CPU speed-ups, behind one switch (``speedups``; ``ModelConfig.cpu_speedups``,
on by default where the model is on CPU): the lean decode step (``lean``), peft LoRA layers
folded into one product (``lora``), linear layers on oneDNN (``onednn``), denormals flushed to
zero (``denormal``) and freed heap memory returned to the system (``memory``). Each one computes
what the plain path computes (up to fp32 rounding); none imports the rest of the package."""
