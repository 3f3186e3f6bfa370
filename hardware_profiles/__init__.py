"""Built-in hardware profiles (YAML), shipped inside the wheel as simcli.hardware_profiles."""
