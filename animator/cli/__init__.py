"""The command line (``python -m animator``, ``doodlepod-animate``): the parser and the commands in
:mod:`.main`, the terminal's progress bar in :mod:`.progress_bar`."""
