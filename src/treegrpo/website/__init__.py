"""An offline website for web agents: its content (``corpus``), HTML (``html``), the app
(``site``, ``treegrpo serve-web``) and the site served in-process (``local``)."""
