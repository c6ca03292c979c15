"""The receiver's command, ``hookproof receiver`` (:mod:`.receiver`), and what every package's
commands share: the options declared once (:mod:`.options`) and the terminal console
(:mod:`.console`). ``receiver`` is the leaf every package may import, so these live here.
"""
