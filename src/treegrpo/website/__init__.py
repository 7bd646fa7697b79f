"""An offline website over a corpus of articles, to train and evaluate web agents on: what it
serves (``corpus``), its HTML (``html``), the app (``site``, ``treegrpo serve-web``) and the
site served inside a process (``local``)."""
