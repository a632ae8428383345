"""The console's widgets: terminal panes and the side panels."""
